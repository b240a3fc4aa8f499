// kiln::SmallVector: a std::vector-like array that keeps up to N elements inside itself and only
// goes to the heap beyond that. The metadata of an op call is made and copied several times per
// call, so its lists are SmallVectors: shapes and strides (kiln::Shape, no allocation up to
// kMaxInlineDims dimensions), the input and output metadata `infer` sees and returns
// (kiln::MetaList) and the tensors an op call returns (kiln::TensorList).
//
//   kiln::Shape s{2, 3};         // inline
//   s.push_back(4);              // still inline
//   std::vector<int64_t> v = s;  // converts both ways
//
// Elements are any type whose move constructor does not throw. Trivially copyable ones (shape
// extents) are moved with memcpy, and a copy of an inline list copies the whole fixed-size buffer,
// which the compiler turns into a few moves. The interface is the subset of std::vector that Kiln
// uses; iterators are pointers, and, as with std::vector, any growth invalidates them. Unlike
// std::vector, moving (or returning) a list that is inline moves its elements too, so pointers,
// references and spans into it do not survive that either. Ranges given to insert may lie in
// the list itself; those given to assign may not (as with std::vector). A copy that throws
// inside resize, insert or assign leaves the elements made so far in place (the basic
// guarantee).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <new>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <vector>

namespace kiln {

template <typename T, size_t N>
class SmallVector {
  static_assert(N > 0, "SmallVector keeps at least one element inline");
  static_assert(std::is_nothrow_move_constructible_v<T>,
                "SmallVector moves its elements when it grows: their move must not throw");
  static_assert(alignof(T) <= alignof(std::max_align_t), "the heap buffer comes from malloc");
  static constexpr bool kTrivial = std::is_trivially_copyable_v<T>;

 public:
  using value_type = T;
  using size_type = size_t;
  using difference_type = std::ptrdiff_t;
  using reference = T&;
  using const_reference = const T&;
  using pointer = T*;
  using const_pointer = const T*;
  using iterator = T*;
  using const_iterator = const T*;
  using reverse_iterator = std::reverse_iterator<iterator>;
  using const_reverse_iterator = std::reverse_iterator<const_iterator>;

  // User-provided, so that value-initialization (`Shape()`, `Shape{}`) does not zero the inline
  // buffer first: a tensor's metadata is made on every op call. The other constructors delegate
  // to it, so that the destructor cleans up after an element's copy that throws half-way.
  SmallVector() noexcept {}
  explicit SmallVector(size_t n) : SmallVector() { resize(n); }
  SmallVector(size_t n, const T& value) : SmallVector() { resize(n, value); }
  SmallVector(std::initializer_list<T> values) : SmallVector() {
    append(values.begin(), values.end());
  }
  template <typename It, typename = typename std::iterator_traits<It>::iterator_category>
  SmallVector(It first, It last) : SmallVector() {
    append(first, last);
  }
  SmallVector(const std::vector<T>& v) : SmallVector() {  // NOLINT: implicit
    append(v.begin(), v.end());
  }
  SmallVector(const SmallVector& other) : SmallVector() { copy_from(other); }
  SmallVector(SmallVector&& other) noexcept { take(other); }
  ~SmallVector() { release(); }

  SmallVector& operator=(const SmallVector& other) {
    if (this != &other) copy_from(other);
    return *this;
  }
  SmallVector& operator=(SmallVector&& other) noexcept {
    if (this != &other) {
      release();
      take(other);
    }
    return *this;
  }
  SmallVector& operator=(std::initializer_list<T> values) {
    assign(values.begin(), values.end());
    return *this;
  }
  operator std::vector<T>() const& { return std::vector<T>(begin(), end()); }  // NOLINT
  operator std::vector<T>() && {  // NOLINT: a list about to die gives its elements up
    return std::vector<T>(std::make_move_iterator(begin()), std::make_move_iterator(end()));
  }

  void assign(size_t n, const T& value) {
    const T copy = value;  // `value` may live in this vector
    clear();
    resize(n, copy);
  }
  template <typename It, typename = typename std::iterator_traits<It>::iterator_category>
  void assign(It first, It last) {
    clear();
    append(first, last);
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  size_t capacity() const { return capacity_; }
  T* data() { return data_; }
  const T* data() const { return data_; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }
  T& at(size_t i) { return data_[checked(i)]; }
  const T& at(size_t i) const { return data_[checked(i)]; }
  T& front() { return data_[0]; }
  const T& front() const { return data_[0]; }
  T& back() { return data_[size_ - 1]; }
  const T& back() const { return data_[size_ - 1]; }

  iterator begin() { return data_; }
  iterator end() { return data_ + size_; }
  const_iterator begin() const { return data_; }
  const_iterator end() const { return data_ + size_; }
  const_iterator cbegin() const { return data_; }
  const_iterator cend() const { return data_ + size_; }
  reverse_iterator rbegin() { return reverse_iterator(end()); }
  reverse_iterator rend() { return reverse_iterator(begin()); }
  const_reverse_iterator rbegin() const { return const_reverse_iterator(end()); }
  const_reverse_iterator rend() const { return const_reverse_iterator(begin()); }

  void reserve(size_t n) {
    if (n <= capacity_) return;
    const size_t grown = std::max(n, capacity_ * 2);
    T* heap = static_cast<T*>(std::malloc(grown * sizeof(T)));
    if (heap == nullptr) throw std::bad_alloc();
    if constexpr (kTrivial) {
      if (size_ > 0) std::memcpy(heap, data_, size_ * sizeof(T));
    } else {
      std::uninitialized_move(data_, data_ + size_, heap);
      std::destroy(data_, data_ + size_);
    }
    if (data_ != inline_) std::free(data_);
    data_ = heap;
    capacity_ = grown;
  }
  void resize(size_t n) {  // new elements value-initialized in place
    if (n <= size_) {
      destroy_from(n);
      return;
    }
    reserve(n);
    for (; size_ < n; ++size_) new (data_ + size_) T();
  }
  void resize(size_t n, const T& value) {
    if (n <= size_) {
      destroy_from(n);
      return;
    }
    const T copy = value;  // `value` may live in this vector
    reserve(n);
    for (; size_ < n; ++size_) new (data_ + size_) T(copy);
  }
  void clear() { destroy_from(0); }
  void push_back(const T& value) { emplace_back(value); }
  void push_back(T&& value) { emplace_back(std::move(value)); }
  template <typename... Args>
  T& emplace_back(Args&&... args) {
    if (size_ == capacity_) {
      T value(std::forward<Args>(args)...);  // the arguments may live in this vector
      reserve(size_ + 1);
      new (data_ + size_) T(std::move(value));
    } else {
      new (data_ + size_) T(std::forward<Args>(args)...);
    }
    return data_[size_++];
  }
  void pop_back() { destroy_from(size_ - 1); }

  iterator insert(const_iterator pos, const T& value) { return insert(pos, size_t{1}, value); }
  iterator insert(const_iterator pos, size_t n, const T& value) {
    const auto at = static_cast<size_t>(pos - data_);
    const size_t old_size = size_;
    resize(size_ + n, value);
    std::rotate(data_ + at, data_ + old_size, data_ + size_);
    return data_ + at;
  }
  template <typename It, typename = typename std::iterator_traits<It>::iterator_category>
  iterator insert(const_iterator pos, It first, It last) {
    const auto at = static_cast<size_t>(pos - data_);
    const size_t old_size = size_;
    if constexpr (std::is_convertible_v<It, const_iterator>) {
      // The range may live in this vector, which append may move: copy it out first.
      const SmallVector copy(first, last);
      append(copy.begin(), copy.end());
    } else {
      append(first, last);
    }
    std::rotate(data_ + at, data_ + old_size, data_ + size_);
    return data_ + at;
  }
  iterator insert(const_iterator pos, std::initializer_list<T> values) {
    return insert(pos, values.begin(), values.end());
  }
  iterator erase(const_iterator pos) { return erase(pos, pos + 1); }
  iterator erase(const_iterator first, const_iterator last) {
    T* const to = data_ + (first - data_);
    if (first == last) return to;  // (std::move onto itself is outside its contract)
    T* const from = data_ + (last - data_);
    destroy_from(static_cast<size_t>(std::move(from, end(), to) - data_));
    return to;
  }

  // An element loop, not std::equal: for extents that is a call to memcmp, more than the
  // comparison of a few-dimensional shape costs (two per small elementwise op).
  friend bool operator==(const SmallVector& a, const SmallVector& b) {
    if (a.size_ != b.size_) return false;
    for (size_t i = 0; i < a.size_; ++i) {
      if (!(a.data_[i] == b.data_[i])) return false;
    }
    return true;
  }
  friend bool operator!=(const SmallVector& a, const SmallVector& b) { return !(a == b); }
  friend bool operator<(const SmallVector& a, const SmallVector& b) {
    return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end());
  }
  friend bool operator==(const SmallVector& a, const std::vector<T>& b) {
    return a.size_ == b.size() && std::equal(a.begin(), a.end(), b.begin());
  }
  friend bool operator==(const std::vector<T>& a, const SmallVector& b) { return b == a; }
  friend bool operator!=(const SmallVector& a, const std::vector<T>& b) { return !(a == b); }
  friend bool operator!=(const std::vector<T>& a, const SmallVector& b) { return !(b == a); }

 private:
  size_t checked(size_t i) const {
    if (i >= size_) throw std::out_of_range("SmallVector::at: index past the end");
    return i;
  }
  // Copies [first, last) onto the end.
  template <typename It>
  void append(It first, It last) {
    reserve(size_ + static_cast<size_t>(std::distance(first, last)));
    if constexpr (kTrivial) {
      size_ = static_cast<size_t>(std::copy(first, last, data_ + size_) - data_);
    } else {
      for (; first != last; ++first, ++size_) new (data_ + size_) T(*first);
    }
  }
  // Destroys the elements from index n on.
  void destroy_from(size_t n) {
    if constexpr (!kTrivial) std::destroy(data_ + n, data_ + size_);
    size_ = n;
  }
  void release() {
    clear();
    if (data_ != inline_) std::free(data_);
    data_ = inline_;
    capacity_ = N;
  }
  // Copies other's elements. When both are inline, trivially copyable elements go as the whole
  // inline buffer: a fixed-size copy (a heap buffer, when other has one, holds more than N
  // elements, so reading N is in bounds; the bytes past size_ are never read as values).
  void copy_from(const SmallVector& other) {
    if constexpr (kTrivial) {
      if (data_ == inline_ && other.size_ <= N) {
        copy_buffer(other.data_);
        size_ = other.size_;
        return;
      }
    }
    assign(other.begin(), other.end());
  }
  // Copies N elements' bytes from `from` into the inline buffer: past the size, bytes that were
  // never written, which is harmless (they are never read as values) but what GCC's
  // maybe-uninitialized analysis warns about.
  void copy_buffer(const T* from) {
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
    std::memcpy(inline_, from, sizeof(inline_));
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
  }
  // Moves other's elements here (this is empty and inline); leaves other empty. Inline trivially
  // copyable elements go as the whole buffer, like copy_from's (a copy of variable length is a
  // call into the C library).
  void take(SmallVector& other) noexcept {
    if (other.data_ == other.inline_) {
      if constexpr (kTrivial) {
        copy_buffer(other.inline_);
      } else {
        std::uninitialized_move(other.data_, other.data_ + other.size_, data_);
        std::destroy(other.data_, other.data_ + other.size_);
      }
    } else {
      data_ = other.data_;
      capacity_ = other.capacity_;
      other.data_ = other.inline_;
      other.capacity_ = N;
    }
    size_ = other.size_;
    other.size_ = 0;
  }

  T* data_ = inline_;
  size_t size_ = 0;
  size_t capacity_ = N;
  // A union, so that the inline elements are constructed only as they are added.
  union {
    T inline_[N];
  };
};

}  // namespace kiln
